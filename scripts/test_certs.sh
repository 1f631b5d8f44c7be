#!/usr/bin/env bash
# Makes a throwaway CA and certificates for TLS tests (openssl, P-256, valid 2 days):
#   DIR/ca.crt                      the CA (its key DIR/ca.key)
#   DIR/server.crt, server.key      for 127.0.0.1 and localhost (server and client use)
#   DIR/client.crt, client.key      a client certificate without a Common Name: etcd's JSON
#                                   gateway refuses one with a Common Name (etcd 3.4.10+)
#   DIR/client-cn.crt, .key         a client certificate with CN=sekka (refused by that rule)
#   DIR/other-ca.crt                a second CA that signed none of them
# Usage: scripts/test_certs.sh DIR
set -euo pipefail
dir=${1:?directory}
mkdir -p "$dir"
cd "$dir"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2> /dev/null; }
ca() {
  key "$1.key"
  openssl req -x509 -new -key "$1.key" -out "$1.crt" -days 2 -subj "/CN=$2" 2> /dev/null
}
sign() {  # name subject extensions
  key "$1.key"
  openssl req -new -key "$1.key" -out "$1.csr" -subj "$2" 2> /dev/null
  printf '%b' "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" -days 2 \
    -extfile "$1.ext" 2> /dev/null
  rm -f "$1.csr" "$1.ext"
}
ca ca "sekka test CA"
ca other-ca "another test CA"
sign server "/CN=etcd test server" \
  "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth"
sign client "/O=sekka" "extendedKeyUsage=clientAuth"
sign client-cn "/CN=sekka" "extendedKeyUsage=clientAuth"
chmod 600 ./*.key
