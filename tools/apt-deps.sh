#!/usr/bin/env bash
# Make sure the Debian packages a target needs are installed.
#   tools/apt-deps.sh base    # audio + corpus synthesis (make demo / make test)
#   tools/apt-deps.sh kenlm   # compilers and libraries for lmplz/build_binary (make kenlm)
#   tools/apt-deps.sh browser # headless Chromium and its WebDriver, for the ds2-demo browser test
#   tools/apt-deps.sh heldout # festival and three English voices, for make demo-heldout
#   tools/apt-deps.sh lmtext  # WordNet, FOLDOC, more fortunes and English manuals: ds2-prepare english's LM text
# As root it installs what is missing; otherwise it prints the exact apt-get line and exits 1.
# DS2_APT_EXTRA="pkg ..." adds packages to require (e.g. sph2pipe for compressed WSJ audio).
set -euo pipefail

base=(espeak-ng flite sox libsox-fmt-all libsndfile1 fortunes fortunes-zh)
kenlm=(cmake g++ make libboost-program-options-dev libboost-system-dev libboost-thread-dev
       libboost-test-dev zlib1g-dev libbz2-dev liblzma-dev libeigen3-dev)
browser=(chromium chromium-driver)
heldout=(festival festvox-kdlpc16k festvox-kallpc16k festvox-us-slt-hts)
lmtext=(wordnet-base dict-foldoc fortune-anarchism fortunes-bofh-excuses tfortunes gnome-user-docs debian-handbook
        debian-reference-en)

want=(${DS2_APT_EXTRA:-})
for set in "$@"; do
  case "$set" in
    base) want+=("${base[@]}") ;;
    kenlm) want+=("${kenlm[@]}") ;;
    browser) want+=("${browser[@]}") ;;
    heldout) want+=("${heldout[@]}") ;;
    lmtext) want+=("${lmtext[@]}") ;;
    *) echo "apt-deps.sh: unknown package set '$set' (expected: base, kenlm, browser, heldout, lmtext)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

line="apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "Missing Debian packages. Run as root, then re-run make:" >&2
  echo "  sudo apt-get update && sudo $line" >&2
  exit 1
fi
echo "Installing Debian packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
$line -qq
