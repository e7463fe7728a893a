#!/bin/bash
set -e
echo done > /app/state.txt
