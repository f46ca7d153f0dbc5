#!/usr/bin/env bash
# The steps of action.yml: installs the CLI the service serves (the client that matches it),
# then uploads INPUT_UPLOAD or downloads INPUT_DOWNLOAD, and writes code, url and sha256 to
# $GITHUB_OUTPUT. Any failure of the CLI (a digest mismatch is exit 5) fails the step with its
# exit code and its one-line message. Needs bash, curl and node (every GitHub runner has them).
set -euo pipefail

fail () { echo "::error title=dropcode::$1" >&2; exit "${2:-2}"; }
[ -n "${DROPCODE_URL:-}" ] || fail 'the url input is required'
if [ -n "${INPUT_UPLOAD:-}" ] && [ -n "${INPUT_DOWNLOAD:-}" ]; then fail 'give upload or download, not both'; fi
[ -n "${INPUT_UPLOAD:-}${INPUT_DOWNLOAD:-}" ] || fail 'give upload (a path) or download (a code)'
url="${DROPCODE_URL%/}"
export DROPCODE_URL="$url"

bin="${RUNNER_TEMP:-${TMPDIR:-/tmp}}/dropcode-cli-$$.mjs"
curl -fsSL --retry 3 "$url/cli/dropcode.mjs" -o "$bin" || fail "cannot fetch the CLI from $url/cli/dropcode.mjs" 6
trap 'rm -f "$bin"' EXIT

# One field of the CLI's JSON answer (its last line on stdout).
field () { node -e 'const a = JSON.parse(process.argv[1]); process.stdout.write(String(a[process.argv[2]] ?? ""))' "$1" "$2"; }
out="${GITHUB_OUTPUT:-/dev/stdout}"

status=0
if [ -n "${INPUT_UPLOAD:-}" ]; then
  [ -n "${DROPCODE_KEY:-}" ] || fail 'uploading takes an API key: the key input'
  args=(upload "$INPUT_UPLOAD" --json)
  [ -n "${INPUT_MAX_DOWNLOADS:-}" ] && args+=(--max-downloads "$INPUT_MAX_DOWNLOADS")
  [ -n "${INPUT_EXPIRY_HOURS:-}" ] && args+=(--expiry-hours "$INPUT_EXPIRY_HOURS")
  answer=$(node "$bin" "${args[@]}") || status=$?
  [ "$status" -eq 0 ] || exit "$status"
  code=$(field "$answer" code)
  sha256=$(field "$answer" sha256)
else
  code="$INPUT_DOWNLOAD"
  args=(download "$code" --json)
  [ -n "${INPUT_PATH:-}" ] && args+=(-o "$INPUT_PATH")
  # A tar (a directory handed over) is unpacked, all or nothing; anything else is saved as it is.
  name=$(node "$bin" info "$code" --json) || status=$?
  [ "$status" -eq 0 ] || exit "$status"
  case "$(field "$name" name)" in *.tar) args+=(--extract) ;; esac
  answer=$(node "$bin" "${args[@]}") || status=$?
  [ "$status" -eq 0 ] || exit "$status"
  sha256=$(field "$answer" sha256)
fi
{
  echo "code=$code"
  echo "url=$url/d/$code"
  echo "sha256=$sha256"
} >> "$out"
