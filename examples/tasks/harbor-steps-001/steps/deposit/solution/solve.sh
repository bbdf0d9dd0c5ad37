#!/bin/bash
set -euo pipefail
cat > /app/bin/deposit <<'SH'
#!/bin/bash
set -euo pipefail
now=$(/app/bin/balance)
echo "balance=$((now + $1))" > /app/ledger.txt
SH
chmod +x /app/bin/deposit
/app/bin/deposit 50
