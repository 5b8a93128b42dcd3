import {
  type Operation,
  PATH_ITEM_METHODS,
  type PathItem,
  type PathItemMethod,
  type Paths,
  ref,
  response,
} from './parts.js'

/**
 * Each path item with what the service answers beside the routes it lists (allowed-methods.ts,
 * error-handling.ts): `head` wherever `get` is (Fastify answers HEAD with GET's head),
 * `options` (204 with Allow), and an operation answering 405 with Allow for every other method
 * an OpenAPI path item can name, so that a validator finds an operation for every request.
 * A path item's own operations stay as they are.
 */
export function withEveryMethod(paths: Paths): Paths {
  const complete: Paths = {}
  for (const [path, item] of Object.entries(paths)) complete[path] = completeItem(item)
  return complete
}

function completeItem(item: PathItem): PathItem {
  const first = PATH_ITEM_METHODS.map((method) => item[method]).find((op) => op !== undefined)
  if (first === undefined) return item
  const common = {
    ...(first.tags === undefined ? {} : { tags: first.tags }),
    parameters: sharedParameters(first),
  }
  const complete: PathItem = { ...item }
  if (item.get !== undefined && item.head === undefined) complete.head = headOf(item.get)
  complete.options ??= {
    ...common,
    summary: 'The methods this path accepts',
    responses: { '204': response('Options') },
  }
  for (const method of PATH_ITEM_METHODS) complete[method] ??= notAllowed(method, common)
  return complete
}

/** GET's operation for HEAD: the same answers' heads, without their bodies. */
function headOf(get: Operation): Operation {
  return {
    ...get,
    ...(get.operationId === undefined ? {} : { operationId: `${get.operationId}Head` }),
    summary: `${get.summary ?? 'GET'}: the head alone`,
    responses: { ...get.responses },
    description:
      'The status and headers that GET would answer (Content-Type and ETag included), with no body.',
  }
}

function notAllowed(method: PathItemMethod, common: Partial<Operation>): Operation {
  return {
    ...common,
    summary: `${method.toUpperCase()} is not allowed`,
    description: `Answers 405: \`Allow\` lists the methods this path accepts.`,
    responses: { '405': response('MethodNotAllowed') },
  }
}

/** The operation's path parameters and X-Request-Id, which every operation on its path takes. */
function sharedParameters(operation: Operation): unknown[] {
  const path = (operation.parameters ?? []).filter(
    (parameter) =>
      typeof parameter === 'object' &&
      parameter !== null &&
      'in' in parameter &&
      parameter.in === 'path',
  )
  return [...path, ref('parameters', 'RequestId')]
}
