#!/bin/bash
[ "$(cat /app/ok.txt)" = ok ]
