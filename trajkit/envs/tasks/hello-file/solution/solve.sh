#!/bin/bash
set -e
printf 'Hello, Harbor!\n' > /app/hello.txt
