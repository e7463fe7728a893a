echo '{"answer": 42}' > /app/answer.json
