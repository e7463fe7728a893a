#!/bin/bash
set -e
cd /app/notes
for f in *.txt; do mv "$f" "${f%.txt}.md"; done
