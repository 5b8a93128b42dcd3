import type { Config, Option, Setting } from './config.js'
import type { PackageInfo } from './package-info.js'
import { isRejection } from './value-parsers.js'

/**
 * Whether a command's arguments ask for its help: '--help' or '-h' anywhere among them, whatever
 * else is there (`token --sub alice --help` prints the help, and signs nothing).
 */
export function asksForHelp(args: readonly string[]): boolean {
  return args.includes('--help') || args.includes('-h')
}

/**
 * The text of `notes-service --help`, made from the options table so that it lists every
 * option with its flag, environment variable, default and accepted values.
 */
export function formatHelp(options: readonly Option<Setting>[], info: PackageInfo): string {
  const lines = [
    `${info.name} ${info.version}: ${info.description}`,
    '',
    `Usage: ${info.name} [options]`,
    `       ${info.name} token --sub NAME [--ttl 1h]`,
    '         prints a user token signed with AUTH_JWT_SECRET, for trying user notebooks out',
    `       ${info.name} export [--out FILE]`,
    '         writes every notebook of DATA_FILE or DATABASE_URL to FILE (default stdout)',
    `       ${info.name} import FILE [--replace]`,
    '         reads an export into DATA_FILE or DATABASE_URL; --replace replaces the notes there',
    `       ${info.name} token|export|import --help`,
    '         prints what that command takes and does',
    '',
    'Each option can also be set by the environment variable shown; a flag wins over the variable.',
    '',
  ]
  for (const option of options) {
    const value = typeof option.default === 'boolean' ? '[true|false]' : '<value>'
    lines.push(`  ${option.flag} ${value}`)
    lines.push(`      ${capitalize(option.description)}.`)
    lines.push(
      `      env ${option.env}, default ${showDefault(option.default)}; ${acceptedValues(option)}`,
    )
  }
  lines.push('  --help', '      Print this help and exit.')
  lines.push('  --version', '      Print the version and exit.')
  return `${lines.join('\n')}\n`
}

/** 3000 -> '3000'; [] and '' -> 'none'; ['https://a.example', 'https://b.example'] -> 'https://a.example,https://b.example' */
function showDefault(value: Config[keyof Config]): string {
  if (Array.isArray(value)) return value.length === 0 ? 'none' : value.join(',')
  return value === '' ? 'none' : String(value)
}

/** What the option's parser accepts, in its own words: every parser rejects a NUL character. */
function acceptedValues(option: Option<Setting>): string {
  const answer = option.parse('\0')
  return isRejection(answer) ? answer.expected : 'any text'
}

function capitalize(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1)
}
