"""The browser's door: pages, the chat socket, HTML fragments, accounts and tokens pages."""
