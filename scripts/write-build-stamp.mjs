/** Run by `npm run build` after tsc: records which sources dist/ was built from (see build-state.mjs). */
import { fileURLToPath } from 'node:url';
import { writeStamp } from './build-state.mjs';

writeStamp(fileURLToPath(new URL('..', import.meta.url)));
