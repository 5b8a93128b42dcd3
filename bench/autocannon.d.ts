// The part of autocannon's API the bench uses; the package ships no types.
declare module 'autocannon' {
  interface Options {
    url: string
    method?: string
    body?: string
    headers?: Record<string, string>
    connections?: number
    duration?: number
    timeout?: number
  }
  interface Histogram {
    average: number
    total: number
    p50: number
    p99: number
  }
  interface Result {
    requests: Histogram
    latency: Histogram
    duration: number
    errors: number
    timeouts: number
    non2xx: number
  }
  function autocannon(options: Options): Promise<Result>
  export default autocannon
}
