"""The audit log: what staff did that touches people's data or rights (reading another person's
transcript, exports, erasures, budget and permission changes, share links revoked), written as
it happens and readable, never editable, in the admin."""
