#!/bin/bash
# Reference solution: git config --system (Debian's git reads /etc/gitconfig).
set -euo pipefail
git config --system init.defaultBranch trunk
git config --system alias.st "status --short --branch"
git config --system pull.rebase true
git config --system user.name "Build Bot"
git config --system user.email build-bot@example.invalid
