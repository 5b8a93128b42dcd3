/** The banner's words for each state (its data-state). */
const LINK_TEXT = {
  unavailable: 'Not following changes: a key is needed.',
  retrying:
    'Offline: the notes shown are this device’s copy; changes are kept and sent when the service is back.',
  live: 'Live: changes made elsewhere appear here.',
  connecting: 'Connecting to live changes…',
} as const

/**
 * What the page knows of its link to the service, and the banner that says it: the change feed's
 * connection, and whether the last request reached the service. A feed connection can outlive an
 * outage (only the way to the API was cut) and writes can fail while it holds, so neither alone
 * says it: "Live" needs both, and the first answer after an outage ends "Offline".
 */
export class LinkStatus {
  readonly #banner: HTMLElement
  readonly #keyNeeded: () => boolean
  #feedOpen = false
  #unreachable = false

  /** `keyNeeded`: the page waits for a key, which the banner says before anything else. */
  constructor(banner: HTMLElement, keyNeeded: () => boolean) {
    this.#banner = banner
    this.#keyNeeded = keyNeeded
  }

  feed(open: boolean): void {
    this.#feedOpen = open
    this.show()
  }

  reached(reachable: boolean): void {
    this.#unreachable = !reachable
    this.show()
  }

  show(): void {
    const state: keyof typeof LINK_TEXT = this.#keyNeeded()
      ? 'unavailable'
      : this.#unreachable
        ? 'retrying'
        : this.#feedOpen
          ? 'live'
          : // The last request was answered: the feed is on its way (back).
            'connecting'
    // A role="status" is read out on each change: the same words are not said again.
    if (this.#banner.dataset.state === state) return
    this.#banner.dataset.state = state
    this.#banner.textContent = LINK_TEXT[state]
  }
}
