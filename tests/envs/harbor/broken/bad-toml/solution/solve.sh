#!/bin/bash
set -e
echo ok > /app/ok.txt
