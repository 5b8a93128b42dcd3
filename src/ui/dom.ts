/**
 * Builds DOM elements from text only: every string becomes a Text node, every attribute value
 * goes through setAttribute, so nothing here can turn note content into markup. (The page's
 * Content-Security-Policy also requires Trusted Types: an innerHTML assignment would throw.)
 */
export type Child = Node | string | null | undefined | false

export type Attributes = Record<string, string | boolean | undefined>

/** h('p', { class: 'error' }, 'Not saved: ', detail) -> <p class="error">Not saved: …</p> */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attributes: Attributes = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag)
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === false) continue
    element.setAttribute(name, value === true ? '' : value)
  }
  append(element, ...children)
  return element
}

function append(parent: Node, ...children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue
    parent.appendChild(typeof child === 'string' ? document.createTextNode(child) : child)
  }
}

/** Replaces every child of `parent` with `children`. */
export function replaceChildren(parent: Element, ...children: Child[]): void {
  parent.replaceChildren()
  append(parent, ...children)
}

/** The element with this id, which the page's HTML must have. */
export function byId<T extends HTMLElement>(id: string, type: { new (): T }): T {
  const element = document.getElementById(id)
  if (!(element instanceof type)) throw new Error(`the page has no ${type.name} #${id}`)
  return element
}

let counter = 0

/** A fresh element id: 'n1', 'n2' ... */
export function uniqueId(prefix = 'n'): string {
  counter += 1
  return `${prefix}${counter}`
}
