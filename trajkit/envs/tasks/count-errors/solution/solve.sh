#!/bin/bash
set -e
grep -c 'ERROR' /app/server.log > /app/errors.txt
