/** The six workloads of the benchmark, each run on a fresh server of every target. */

export type WorkloadId = 'W1' | 'W2' | 'W3' | 'W4' | 'W5' | 'W6'

/** One request, sent over and over by the load generator. */
export interface LoadRequest {
  method: 'GET' | 'POST' | 'PATCH'
  path: string
  /** JSON text, sent with Content-Type: application/json. */
  body?: string
}

/** Ids the preload learned from the server's answers. */
export interface PreloadedIds {
  /** The id of the note created halfway through the preload (undefined when nothing was preloaded). */
  middle: number | undefined
  /** The id of the note created last, alone, after every other one. */
  last: number | undefined
}

export interface Workload {
  id: WorkloadId
  title: string
  /** Small notes created over HTTP before the load starts. */
  preload: number
  request: (ids: PreloadedIds) => LoadRequest
  /** Service/floor throughput ratio the service must reach. */
  floorTarget: number
}

const TEXT = 'Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor'

/** 7 -> '{"title":"note 7","body":"Lorem ipsum ... tempor"}' (about 100 bytes) */
export function smallNote(n: number): string {
  return JSON.stringify({ title: `note ${n}`, body: TEXT })
}

function idOf(id: number | undefined): number {
  if (id === undefined) throw new Error('the workload needs a preloaded note')
  return id
}

export const WORKLOADS: readonly Workload[] = [
  {
    id: 'W1',
    title: 'GET one note of 1,000 (a middle id)',
    preload: 1_000,
    request: (ids) => ({ method: 'GET', path: `/api/note/${idOf(ids.middle)}` }),
    floorTarget: 0.9,
  },
  {
    id: 'W2',
    title: 'GET the list of 100 small notes',
    preload: 100,
    request: () => ({ method: 'GET', path: '/api/note' }),
    floorTarget: 0.95,
  },
  {
    id: 'W3',
    title: 'GET the list of 10,000 small notes',
    preload: 10_000,
    request: () => ({ method: 'GET', path: '/api/note' }),
    floorTarget: 1.5,
  },
  {
    id: 'W4',
    title: 'POST a ~100-byte note (the store grows)',
    preload: 0,
    request: () => ({ method: 'POST', path: '/api/note', body: smallNote(1_000_000) }),
    floorTarget: 0.9,
  },
  {
    id: 'W5',
    title: 'PATCH a note of 1,000 with a small body',
    preload: 1_000,
    request: (ids) => ({
      method: 'PATCH',
      path: `/api/note/${idOf(ids.middle)}`,
      body: JSON.stringify({ title: 'note edited' }),
    }),
    floorTarget: 0.9,
  },
  {
    id: 'W6',
    title: 'GET the last-created note of 100,000',
    preload: 100_000,
    request: (ids) => ({ method: 'GET', path: `/api/note/${idOf(ids.last)}` }),
    floorTarget: 0.9,
  },
]
