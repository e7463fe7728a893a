wc -l < /app/words.txt > /app/count.txt
