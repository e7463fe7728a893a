echo "rows: $(($(wc -l < /app/data.csv) - 1))" > /app/report.txt
