import { readFileSync } from 'node:fs'
import { pageSources } from '../src/pages/notes-page.js'
import { COMPRESSED_PAGE, writeCompressedPage } from '../src/pages/page-compression.js'

/**
 * `node dist/scripts/precompress-page.js`, the last step of `npm run build` and `npm run
 * compile`: writes the brotli and gzip copies of the page's files that the service would
 * otherwise make at every start-up (page-compression.ts), and removes stale ones.
 */
const { written, kept, removed } = writeCompressedPage(
  pageSources().map(({ url }) => readFileSync(url)),
)
process.stdout.write(
  `page files compressed in ${COMPRESSED_PAGE.pathname}: ${written} written, ${kept} kept, ${removed} removed\n`,
)
