import { type Config, OPTIONS } from '../config/config.js'

/** The features a setting turns on that are served at paths of their own. */
const FEATURES = [
  { key: 'ui', paths: /^\/(?:ui\/.*)?$/, what: 'The notes page (/) is', it: 'it' },
  { key: 'docs', paths: /^\/docs(?:\/.*)?$/, what: 'The API reference page (/docs) is', it: 'it' },
  {
    key: 'metrics',
    paths: /^\/metrics\/?$/,
    what: 'Prometheus metrics (/metrics) are',
    it: 'them',
  },
] as const

/**
 * What a request for the path of a feature that is off is told, instead of the 404 of a path that
 * is not the service's, naming the setting as --help does:
 * '/docs' with docs off -> 'The API reference page (/docs) is off: start the service with
 * DOCS=true (or the flag --docs) to serve it.'; '/docs' with docs on, '/api/x' -> undefined.
 */
export function turnedOff(
  config: Pick<Config, 'ui' | 'docs' | 'metrics'>,
): (path: string) => string | undefined {
  const off = FEATURES.filter((feature) => !config[feature.key]).map((feature) => {
    const option = OPTIONS.find((o) => o.key === feature.key) as (typeof OPTIONS)[number]
    return {
      paths: feature.paths,
      detail: `${feature.what} off: start the service with ${option.env}=true (or the flag ${option.flag}) to serve ${feature.it}.`,
    }
  })
  return (path) => off.find((feature) => feature.paths.test(path))?.detail
}
