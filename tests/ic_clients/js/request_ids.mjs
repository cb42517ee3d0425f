// Request ids as @dfinity/agent computes them: requestIdOf over each content map.
// stdin:  {"contents": [map, ...]}   (blobs and nats marked, see io.mjs)
// stdout: {"request_ids": [hex, ...], "hash_of_map": [hex, ...]}
import { hashOfMap, requestIdOf } from '@dfinity/agent';
import { bytesToHex, fromJsonValue, run } from './io.mjs';

run(async ({ contents }) => {
  const maps = contents.map(fromJsonValue);
  return {
    request_ids: maps.map(m => bytesToHex(requestIdOf(m))),
    hash_of_map: maps.map(m => bytesToHex(hashOfMap(m))),
  };
});
