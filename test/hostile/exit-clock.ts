/**
 * Loaded into every service the harness starts (`node --import exit-clock.js dist/src/server.js`),
 * never by the service itself. It loads parent-watch.ts (the service stops when the harness is
 * gone), and writes two times to stderr, by the service's own clock:
 *   - when the process takes its first SIGTERM, so the harness knows the service has begun its
 *     shutdown without waiting for the log line that says so. Under the SIGTERM fault that line
 *     sits behind about 100,000 request log lines in the stdout pipe, which the busy harness read
 *     up to 4.9 s after the signal (Node 24): the harness, not the service, then held the requests
 *     in flight unfinished, and the shutdown looked that slow;
 *   - when the process exits, so the harness times a shutdown by the service's clock rather than by
 *     when its busy event loop gets round to the child's 'exit' event (it once saw an exit 4.3 s
 *     late, 50 autocannon clients reconnecting to a closed port).
 *   stderr: 'signal-clock 1764160000001\n' ... 'exit-clock 1764160000123\n'
 * The SIGTERM listener is a once-listener registered before the service's own (also once), so it
 * runs in the same tick as the service's handler, and a second SIGTERM still ends the process.
 */
import { writeSync } from 'node:fs'
import './parent-watch.js'

process.once('SIGTERM', () => {
  writeSync(2, `signal-clock ${Date.now()}\n`)
})

process.on('exit', () => {
  writeSync(2, `exit-clock ${Date.now()}\n`)
})
