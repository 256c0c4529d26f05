"""Share links: a read-only page of a snapshot of one session, for whoever has the link (signed
in, unless PARLEY_PUBLIC_SHARE_LINKS opens them to anyone), until its owner or staff revoke it
or it expires."""
