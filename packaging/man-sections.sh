#!/usr/bin/env bash
# Writes help2man's --include file for `man sekka`: every subcommand's own --help (and their
# subcommands'), the configuration as `sekka serve --print-config` prints it (every key, its
# default and what it does), the files the package installs, and where the docs are. All of it
# comes from the binary, so the page cannot fall behind the code.
# Usage: packaging/man-sections.sh SEKKA OUT
set -euo pipefail
sekka=${1:?the sekka binary}
out=${2:?the include file}
# The subcommand names under "Subcommands:" in a --help text.
subcommands() { sed -n '/^Subcommands:/,$ s/^  \([a-z][a-z0-9-]*\) .*/\1/p'; }
# Text as literal roff: no fill, backslashes and leading dots, quotes or brackets escaped (a
# line "[server]" would start a section of the include file).
literal() {
  echo '.nf'
  sed -e 's/\\/\\e/g' -e "s/^\([.'[]\)/\\\\\&\1/"
  echo '.fi'
}
{
  echo '[COMMANDS]'
  for sub in $("$sekka" --help | subcommands); do
    echo ".SS \"sekka $sub\""
    help=$("$sekka" "$sub" --help)
    literal <<< "$help"
    for subsub in $(subcommands <<< "$help"); do
      echo ".SS \"sekka $sub $subsub\""
      "$sekka" "$sub" "$subsub" --help | literal
    done
  done
  echo '[CONFIGURATION]'
  echo 'sekka serve reads a TOML file (\fB\-\-config\fR; the package uses'
  echo '\fI/etc/sekka/sekka.toml\fR), then environment variables'
  echo '\fBSEKKA_\fR\fISECTION\fR\fB_\fR\fIKEY\fR, then flags. Every key, at its default:'
  echo '.PP'
  "$sekka" serve --print-config --data-dir /var/lib/sekka | literal
  echo '[FILES]'
  echo '.TP'
  echo '\fI/etc/sekka/sekka.toml\fR'
  echo 'the configuration of the packaged service (a conffile).'
  echo '.TP'
  echo '\fI/var/lib/sekka\fR'
  echo 'its state: high-water marks, worker-id locks, the SQLite segment store.'
  echo '.TP'
  echo '\fI/lib/systemd/system/sekka.service\fR'
  echo 'the systemd unit: \fBsystemctl start sekka\fR, \fBjournalctl \-u sekka\fR.'
  echo '[SEE ALSO]'
  echo '\fI/usr/share/doc/sekka/operations.md\fR (running it), \fIcontract.md\fR (names, wire'
  echo 'formats, errors), \fIprotocol.md\fR (HTTP and Redis commands), \fIdesign.md\fR.'
} > "$out"
