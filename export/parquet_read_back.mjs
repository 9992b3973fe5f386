// Reads a Parquet file with hyparquet (pure JavaScript, independent of our writer) and compares
// every value with NAME.expected.json: column names in order, nulls, booleans, int64 as BigInt
// (beyond 2^53), doubles bit for bit (Object.is: -0 and 5e-324 too), strings as UTF-8.
// Usage: node parquet_read_back.mjs NODE_MODULES FILE.parquet EXPECTED.json
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [modules, file, expectedFile] = process.argv.slice(2);
const hyparquet = await import(pathToFileURL(join(modules, 'hyparquet', 'src', 'node.js')).href);
const expected = JSON.parse(readFileSync(expectedFile, 'utf8'));
const bytes = readFileSync(file);
const buffer = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);

const metadata = hyparquet.parquetMetadata(buffer);
const names = metadata.schema.slice(1).map((s) => s.name);
let failures = 0;
const fail = (message) => {
  failures += 1;
  console.error(`${file}: ${message}`);
};
if (JSON.stringify(names) !== JSON.stringify(expected.columns)) {
  fail(`columns ${JSON.stringify(names)}, expected ${JSON.stringify(expected.columns)}`);
}
if (Number(metadata.num_rows) !== expected.rows.length) {
  fail(`num_rows ${metadata.num_rows}, expected ${expected.rows.length}`);
}

const rows = await hyparquet.parquetReadObjects({ file: buffer });
if (rows.length !== expected.rows.length) fail(`${rows.length} rows, expected ${expected.rows.length}`);
expected.rows.forEach((want, r) => {
  want.forEach((cell, c) => {
    const got = rows[r]?.[expected.columns[c]];
    const where = `row ${r} column ${expected.columns[c]}`;
    if (cell === null) {
      if (got !== null && got !== undefined) fail(`${where}: ${String(got)}, expected null`);
    } else if (typeof cell === 'object' && 'int64' in cell) {
      if (typeof got !== 'bigint' || got !== BigInt(cell.int64)) {
        fail(`${where}: ${String(got)} (${typeof got}), expected int64 ${cell.int64}`);
      }
    } else if (typeof cell === 'object' && 'double' in cell) {
      if (!Object.is(got, Number(cell.double))) fail(`${where}: ${String(got)}, expected ${cell.double}`);
    } else if (got !== cell) {
      fail(`${where}: ${JSON.stringify(String(got))}, expected ${JSON.stringify(cell)}`);
    }
  });
});
if (failures > 0) process.exit(1);
console.log(`${file}: ${rows.length} rows, ${names.length} columns read back as written`);
