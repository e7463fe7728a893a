printf 'apple\nbanana\ncherry\n' > /app/sorted.txt
