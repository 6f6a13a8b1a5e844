#!/usr/bin/env bash
# Make sure the Debian packages a target needs are installed.
#   tools/apt-deps.sh base    # audio + corpus synthesis (make demo / make test)
#   tools/apt-deps.sh kenlm   # compilers and libraries for lmplz/build_binary (make kenlm)
#   tools/apt-deps.sh kernels # the C++ compiler for the fused CPU GRU (make deps; without it training uses the loop)
#   tools/apt-deps.sh browser # headless Chromium and its WebDriver, for the ds2-demo browser test
#   tools/apt-deps.sh heldout # festival and three English voices, for make demo-heldout
#   tools/apt-deps.sh people  # libspandsp2, the G.722 decoder for Asterisk's prompts: make demo-people (examples/people)
#   tools/apt-deps.sh lmtext  # WordNet, FOLDOC, more fortunes and English manuals: ds2-prepare english's LM text
#   tools/apt-deps.sh voices  # MBROLA, RHVoice and SVOX Pico's English voices (Debian contrib/non-free), for
#                             # ds2-prepare tiny --voicebank_share (synthetic/voicebanks.py)
# As root it installs what is missing; otherwise it prints the exact apt-get line and exits 1.
# DS2_APT_EXTRA="pkg ..." adds packages to require (e.g. sph2pipe for compressed WSJ audio).
set -euo pipefail

base=(espeak-ng flite sox libsox-fmt-all libsndfile1 fortunes fortunes-zh)
kenlm=(cmake g++ make libboost-program-options-dev libboost-system-dev libboost-thread-dev
       libboost-test-dev zlib1g-dev libbz2-dev liblzma-dev libeigen3-dev)
kernels=(g++)
browser=(chromium chromium-driver)
heldout=(festival festvox-kdlpc16k festvox-kallpc16k festvox-us-slt-hts)
people=(libspandsp2)
lmtext=(wordnet-base dict-foldoc fortune-anarchism fortunes-bofh-excuses tfortunes gnome-user-docs debian-handbook
        debian-reference-en)

# Most systems list only Debian's main section: the voices' .deb files (bookworm, amd64) come from
# deb.debian.org's pool, checked against these SHA-256 sums, and apt installs them with their dependencies from main.
# RHVoice speaks through its library (librhvoice5); rhvoice's RHVoice-test is the reference its tests and bench
# compare it with.
voices=(mbrola mbrola-us1 mbrola-us2 mbrola-us3 mbrola-en1 librhvoice5 rhvoice rhvoice-english libttspico-utils)
voice_debs=(
  "contrib/m/mbrola/mbrola_3.3+dfsg-9_amd64.deb d94ea5bbb8b201935e8a40d758f1a224030d13a1ba669cc75293823933554c7f"
  "non-free/m/mbrola-us1/mbrola-us1_0.3+repack2-5_all.deb b3284caecfc47023bca46550c5f7cde2f4e8cb4ac3b60840ff8784914c7c85fd"
  "non-free/m/mbrola-us2/mbrola-us2_0.1+repack2-5_all.deb ea95d89157e420b119f078853ddf27383b4cb4c607581c64b0f9079d5ee3f5dc"
  "non-free/m/mbrola-us3/mbrola-us3_0.1+repack2-4_all.deb f8a4e75acc914a58fb7c85ffc3bbea48f0dc2c13704fadd054101020e973c1c2"
  "non-free/m/mbrola-en1/mbrola-en1_19980910+repack2-5_all.deb 1a94a61d15f1e6748563d2f15d12614b71df7c7e25370f433320e011fd1f5f63"
  "non-free/r/rhvoice/rhvoice_1.8.0+dfsg-3_amd64.deb 58d87c29dd1b7ebacb2ab5cd435e6b390d59c0b01e788e2aaf398a98b7694fd2"
  "non-free/r/rhvoice/librhvoice-core7_1.8.0+dfsg-3_amd64.deb 7b321d21caf899c78e579593f105fd49995f4d0c948c0523b2b4baa3291375f5"
  "non-free/r/rhvoice/librhvoice-audio2_1.8.0+dfsg-3_amd64.deb a1b7edc74397a150d83107f66fbb6781ab888053eb6fc65f42479f886d42fd62"
  "non-free/r/rhvoice/librhvoice5_1.8.0+dfsg-3_amd64.deb 7a12f124a48941ec0e94aeaa60da44a27c164a31d5a6bb884875e533a6d15128"
  "non-free/r/rhvoice/rhvoice-english_1.8.0+dfsg-3_all.deb 7ea5227bcfc54b814086f53225ff47052b444d4554e8c4e752c9e6b29edf89a5"
  "non-free/s/svox/libttspico-utils_1.0+git20130326-13_amd64.deb 9a5a3a1a19546c48c698e1e224db47a548786da77e67f559496b7167861b261b"
  "non-free/s/svox/libttspico0_1.0+git20130326-13_amd64.deb fc9e4dbc664a7756ae73e83633d9987e6b0f2fd5248f04def8beb8de6df2cd02"
  "non-free/s/svox/libttspico-data_1.0+git20130326-13_all.deb 25c9904cef2471302634c03deff3ca96b588e22ea94929dda72d940584a3b84a"
)

install_voices() {
  local tmp entry file sum debs=()
  if [ "$(id -u)" -ne 0 ]; then
    echo "Missing Debian voices (${voices[*]}). Run as root, then re-run make:" >&2
    echo "  sudo tools/apt-deps.sh voices" >&2
    exit 1
  fi
  if [ "$(dpkg --print-architecture)" != amd64 ]; then
    echo "apt-deps.sh: the pinned voice packages are amd64 builds; on $(dpkg --print-architecture), enable contrib and" \
         "non-free in apt's sources and run: apt-get install ${voices[*]}" >&2
    exit 1
  fi
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  echo "Fetching Debian voice packages (contrib/non-free, SHA-256 pinned): ${voices[*]}"
  for entry in "${voice_debs[@]}"; do
    file=${entry%% *}; sum=${entry##* }
    curl -fsSL --retry 3 -o "$tmp/${file##*/}" "http://deb.debian.org/debian/pool/$file" || {
      echo "apt-deps.sh: cannot download http://deb.debian.org/debian/pool/$file" >&2; exit 1; }
    echo "$sum  $tmp/${file##*/}" | sha256sum -c --quiet - || {
      echo "apt-deps.sh: ${file##*/} does not match its pinned SHA-256; not installing it" >&2; exit 1; }
    debs+=("$tmp/${file##*/}")
  done
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y --no-install-recommends -qq "${debs[@]}"
}

want=(${DS2_APT_EXTRA:-})
for set in "$@"; do
  case "$set" in
    base) want+=("${base[@]}") ;;
    kenlm) want+=("${kenlm[@]}") ;;
    kernels) want+=("${kernels[@]}") ;;
    browser) want+=("${browser[@]}") ;;
    heldout) want+=("${heldout[@]}") ;;
    people) want+=("${people[@]}") ;;
    lmtext) want+=("${lmtext[@]}") ;;
    voices)
      for p in "${voices[@]}"; do
        if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
          install_voices
          break
        fi
      done ;;
    *) echo "apt-deps.sh: unknown package set '$set' (expected: base, kenlm, kernels, browser, heldout, lmtext, voices)" >&2
       exit 2 ;;
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
