echo forty-two > /app/answer.txt
