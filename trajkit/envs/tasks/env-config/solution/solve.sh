#!/bin/bash
set -e
echo "$APP_MODE" > /app/mode.txt
