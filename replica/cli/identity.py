"""``replica identity new | list | use | whoami``: the user's named keys (Ed25519 or secp256k1)."""

from __future__ import annotations

import argparse
import sys

from replica.errors import ReplicaError

from .help import HelpFormatter

__all__ = ["register"]


def _identity(args: argparse.Namespace) -> int:
    from replica.client.identities import IdentityStore

    store = IdentityStore()
    try:
        if args.identity_command == "new":
            made = store.new(args.name, args.type)
            print(f"created identity {made.name} ({made.key_type}): principal {made.principal}")
        elif args.identity_command == "list":
            selected = store.selected_name()
            for name in store.list():
                print(f"{'*' if name == selected else ' '} {name}")
        elif args.identity_command == "use":
            print(f"using identity {store.use(args.name).name}")
        else:
            name, principal = store.whoami()
            print(f"{name} {principal}")
    except ReplicaError as exc:
        print(f"replica identity {args.identity_command}: {exc}", file=sys.stderr)
        return 2
    return 0


def register(sub) -> None:
    """``identity`` and its subcommands."""
    parser = sub.add_parser("identity", formatter_class=HelpFormatter,
                            help="your identities: Ed25519 or secp256k1 keys in $REPLICA_HOME/identities "
                                 "(0600 PEM files)")
    commands = parser.add_subparsers(dest="identity_command", required=True)
    new = commands.add_parser("new", help="create an identity with a fresh key")
    new.add_argument("name")
    # replica.client.identity.KEY_TYPES, named here so the command line starts without the crypto library
    new.add_argument("--type", choices=("ed25519", "secp256k1"), default="ed25519",
                     help="the key's signature scheme (default: %(default)s)")
    commands.add_parser("list", help="the identities (* marks the one in use)")
    use = commands.add_parser("use", help="use an identity for later calls")
    use.add_argument("name")
    commands.add_parser("whoami", help="the identity in use and its principal (the caller canisters see)")
    parser.set_defaults(func=_identity)
