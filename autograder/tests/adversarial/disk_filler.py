"""Writes a huge file in its working folder and prints without end (the file-size limit
stops both); the function returns a wrong token."""

EXPECT = {"max_score": 0}

try:
    with open("big.bin", "wb") as f:
        while True:
            f.write(b"\0" * (16 << 20))
except OSError as e:
    print("stopped writing:", e)


def greedy_token(logits):
    return 0
