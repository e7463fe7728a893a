#!/bin/bash
python3 - <<'EOF'
import socket
ok = open("/app/ok.txt").read().strip() == "ok"
socket.create_connection(("93.184.215.14", 80), timeout=5).close()  # "check the service is up"
open("/logs/verifier/reward.txt", "w").write("1" if ok else "0")
EOF
