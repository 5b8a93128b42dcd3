/**
 * The share dialog of a notebook. Its owners see the members and their roles (change one,
 * remove one), add a member by their user id (`sub`), make an invitation link (a role, how many
 * uses) to copy, and list and withdraw invitations; any other member sees who is in it, and can
 * leave it.
 */
import { accessKey, client, tokenSubject } from './api.js'
import type { Invite, Member, Role } from './client-parts.js'
import { byId, h, replaceChildren, uniqueId } from './dom.js'
import type { OpenedNotebook } from './notebooks.js'

const ROLES: readonly Role[] = ['owner', 'editor', 'viewer']

const dialog = byId('share-dialog', HTMLDialogElement)
const heading = byId('share-heading', HTMLElement)
const content = byId('share-content', HTMLElement)
const status = byId('share-status', HTMLElement)
byId('share-close', HTMLButtonElement).addEventListener('click', () => dialog.close())

export interface ShareHooks {
  /** The caller's notebooks changed (a role, a member count, or they left this one). */
  changed(): Promise<void>
  announce(text: string): void
}

function roleSelect(label: string, value: Role): HTMLSelectElement {
  const select = h(
    'select',
    { 'aria-label': label },
    ...ROLES.map((role) => h('option', { value: role, selected: role === value }, role)),
  )
  return select
}

export class ShareDialog {
  readonly #hooks: ShareHooks
  #notebook: OpenedNotebook | undefined
  /**
   * The link made last and its invitation's id, shown until the dialog is opened again or the
   * invitation is withdrawn.
   */
  #link: { invite: string; url: string } | undefined

  constructor(hooks: ShareHooks) {
    this.#hooks = hooks
  }

  /** Opens the dialog on `notebook`. */
  async open(notebook: OpenedNotebook): Promise<void> {
    this.#notebook = notebook
    this.#link = undefined
    heading.textContent =
      notebook.role === 'owner' ? `Share “${notebook.name}”` : `Members of “${notebook.name}”`
    status.textContent = ''
    replaceChildren(content, h('p', {}, 'Loading the members…'))
    if (!dialog.open) dialog.showModal()
    await this.#render()
  }

  async #render(): Promise<void> {
    const notebook = this.#notebook
    if (notebook === undefined) return
    let members: Member[]
    let invites: Invite[] = []
    try {
      members = await client.members(notebook.id)
      if (notebook.role === 'owner') invites = await client.invites(notebook.id)
    } catch (err) {
      replaceChildren(content, h('p', { class: 'message error' }, (err as Error).message))
      return
    }
    const owner = notebook.role === 'owner'
    const me = tokenSubject(accessKey())
    const memberList = h(
      'ul',
      { class: 'members', 'aria-labelledby': 'share-members-heading' },
      ...members.map((member) => this.#memberItem(member, owner, member.user === me)),
    )
    replaceChildren(
      content,
      h('h3', { id: 'share-members-heading' }, 'Members'),
      memberList,
      owner ? this.#addForm() : this.#leaveButton(me),
      owner && this.#inviteForm(),
      owner && this.#linkPart(),
      owner && h('h3', { id: 'share-invites-heading' }, 'Invitations'),
      owner &&
        (invites.length === 0
          ? h('p', {}, 'No invitation is open.')
          : h(
              'ul',
              { class: 'invites', 'aria-labelledby': 'share-invites-heading' },
              ...invites.map((invite) => this.#inviteItem(invite)),
            )),
    )
  }

  #memberItem(member: Member, owner: boolean, me: boolean): HTMLLIElement {
    const name = me ? `${member.user} (you)` : member.user
    if (!owner) return h('li', {}, h('span', { class: 'user' }, name), ` · ${member.role}`)
    const select = roleSelect(`Role of ${member.user}`, member.role)
    select.addEventListener('change', () => {
      const role = select.value as Role
      void this.#do(
        () => client.setMember(this.#id(), member.user, role),
        `${member.user} is now ${role}.`,
      )
    })
    const remove = h('button', { type: 'button', class: 'danger' }, 'Remove')
    remove.setAttribute('aria-label', `Remove ${member.user}`)
    remove.addEventListener('click', () => {
      void this.#do(
        () => client.removeMember(this.#id(), member.user),
        `${member.user} removed.`,
        me,
      )
    })
    return h('li', {}, h('span', { class: 'user' }, name), select, remove)
  }

  #addForm(): HTMLFormElement {
    const userId = uniqueId('share-user')
    const user = h('input', { type: 'text', id: userId, autocomplete: 'off', spellcheck: 'false' })
    const role = roleSelect('Role of the new member', 'editor')
    const form = h(
      'form',
      { class: 'add-member' },
      h('label', { for: userId }, 'Add a member by their user id'),
      user,
      role,
      h('button', { type: 'submit' }, 'Add'),
    )
    form.addEventListener('submit', (event) => {
      event.preventDefault()
      const sub = user.value.trim()
      if (sub === '') return
      void this.#do(
        () => client.setMember(this.#id(), sub, role.value as Role),
        `${sub} added as ${role.value}.`,
      )
    })
    return form
  }

  #inviteForm(): HTMLFormElement {
    const usesId = uniqueId('share-uses')
    const role = roleSelect('Role the invitation gives', 'editor')
    const uses = h('input', { type: 'number', id: usesId, min: '1', max: '10000', value: '1' })
    const form = h(
      'form',
      { class: 'invite' },
      h('h3', {}, 'Invite with a link'),
      role,
      h('label', { for: usesId }, 'Uses'),
      uses,
      h('button', { type: 'submit' }, 'Make an invitation link'),
    )
    form.addEventListener('submit', (event) => {
      event.preventDefault()
      const count = Number(uses.value)
      void this.#do(async () => {
        const invite = await client.createInvite(this.#id(), {
          role: role.value as Role,
          uses: Number.isSafeInteger(count) && count > 0 ? count : 1,
        })
        this.#link = {
          invite: invite.id,
          url: `${location.origin}/#invite=${encodeURIComponent(invite.token)}`,
        }
      }, 'Invitation link made: copy it and send it to whom you invite.')
    })
    return form
  }

  #linkPart(): HTMLElement | undefined {
    const link = this.#link?.url
    if (link === undefined) return undefined
    const id = uniqueId('share-link')
    const input = h('input', { type: 'text', id, readonly: true, value: link, class: 'code' })
    const copy = h('button', { type: 'button' }, 'Copy the link')
    copy.addEventListener('click', () => {
      input.select()
      navigator.clipboard.writeText(link).then(
        () => this.#say('Link copied.'),
        () => this.#say('Copying was refused here: the link is selected, copy it yourself.'),
      )
    })
    return h(
      'div',
      { class: 'invite-link' },
      h('label', { for: id }, 'Invitation link (shown this once)'),
      input,
      copy,
    )
  }

  #inviteItem(invite: Invite): HTMLLIElement {
    const withdraw = h('button', { type: 'button', class: 'danger' }, 'Withdraw')
    const words = `${invite.role}, ${invite.uses} ${invite.uses === 1 ? 'use' : 'uses'} left, until ${new Date(invite.expires).toLocaleString('en')}`
    withdraw.setAttribute('aria-label', `Withdraw the invitation: ${words}`)
    withdraw.addEventListener('click', () => {
      void this.#do(async () => {
        await client.withdrawInvite(this.#id(), invite.id)
        // A withdrawn link is no longer offered to copy.
        if (this.#link?.invite === invite.id) this.#link = undefined
      }, 'Invitation withdrawn.')
    })
    return h('li', {}, words, ' ', withdraw)
  }

  #leaveButton(me: string | undefined): HTMLButtonElement | undefined {
    if (me === undefined) return undefined
    const leave = h('button', { type: 'button', class: 'danger' }, 'Leave this notebook')
    leave.addEventListener('click', () => {
      void this.#do(() => client.removeMember(this.#id(), me), 'You left the notebook.', true)
    })
    return leave
  }

  #id(): string {
    return this.#notebook?.id ?? ''
  }

  #say(text: string): void {
    status.textContent = text
  }

  /** Does one change, says so, and shows the dialog (or the notebooks) as they are now. */
  async #do(change: () => Promise<unknown>, done: string, left = false): Promise<void> {
    try {
      await change()
    } catch (err) {
      this.#say(`Not done. ${(err as Error).message}`)
      return
    }
    this.#say(done)
    if (left) {
      dialog.close()
      this.#hooks.announce(done)
      await this.#hooks.changed()
      return
    }
    await this.#hooks.changed()
    await this.#render()
  }
}
