/**
 * Loaded into every service the harness starts (`node --import exit-clock.js dist/src/server.js`),
 * never by the service itself: when the process exits, it writes the time to stderr, so the
 * harness times a shutdown by the service's own clock rather than by when its busy event loop gets
 * round to the child's 'exit' event. Under the SIGTERM fault, 50 autocannon clients reconnecting to
 * a closed port kept the harness (Node 24) from seeing exits for up to 4.3 s after the service had
 * exited in 0.3 s; that delay, not the service, is what once failed the 10 s bound at 14.7 s.
 *   stderr: 'exit-clock 1764160000123\n'
 */
import { writeSync } from 'node:fs'

process.on('exit', () => {
  writeSync(2, `exit-clock ${Date.now()}\n`)
})
