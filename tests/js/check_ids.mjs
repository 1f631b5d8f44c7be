// Reads {"uuids": [...], "ulids": [...]} on stdin and answers, with the npm packages `uuid` and
// `ulid` (independent implementations of RFC 9562 and the ULID spec), what they make of each:
// {"uuids": [{"valid": true, "version": 7}, ...], "ulid_times": [ms, ...]}.
import { validate, version } from 'uuid';
import { decodeTime } from 'ulid';

let input = '';
for await (const chunk of process.stdin) input += chunk;
const { uuids = [], ulids = [] } = JSON.parse(input);
const out = {
  uuids: uuids.map((u) => ({ valid: validate(u), version: validate(u) ? version(u) : null })),
  ulid_times: ulids.map((u) => decodeTime(u)),
};
process.stdout.write(JSON.stringify(out));
