#!/bin/bash
set -euo pipefail
cat > /app/bin/balance <<'SH'
#!/bin/bash
sed -n 's/^balance=//p' /app/ledger.txt
SH
chmod +x /app/bin/balance
