#!/usr/bin/env bash
# Builds the Java client with Debian's JDK and runs its JUnit 5 tests against real `sekka serve`
# (SEKKA_BIN, default ../../build/cli/sekka). No build tool beyond javac, jar and JUnit's
# console launcher (Debian's junit5).
#   bash clients/java/build.sh          $BUILD_DIR/sekka-client.jar, then the tests
#   bash clients/java/build.sh --no-test
# BUILD_DIR defaults to clients/java/build.
set -euo pipefail
cd "$(dirname "$0")"
JUNIT=/usr/share/java/junit-platform-console-standalone.jar
OUT="${BUILD_DIR:-build}"
rm -rf "$OUT" && mkdir -p "$OUT/classes" "$OUT/test-classes"
javac --release 17 -Xlint:all -Werror -d "$OUT/classes" $(find src/main/java -name '*.java')
jar --create --file "$OUT/sekka-client.jar" -C "$OUT/classes" .
[[ "${1:-}" == "--no-test" ]] && exit 0
export SEKKA_BIN="${SEKKA_BIN:-$(cd ../.. && pwd)/build/cli/sekka}"
javac --release 17 -Xlint:all -Xlint:-processing -Werror -cp "$OUT/classes:$JUNIT" \
  -d "$OUT/test-classes" $(find src/test/java -name '*.java')
java -jar "$JUNIT" --disable-banner --disable-ansi-colors --details=tree --fail-if-no-tests \
  -cp "$OUT/classes:$OUT/test-classes" --select-package io.sekka.client
