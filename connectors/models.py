"""Connectors (GitHub, Slack, Gmail, Google Drive, Notion) land here with the connector issues."""
