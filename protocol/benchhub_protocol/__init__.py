"""The rules the agent and the service share (docs/protocol.md): the DSSE envelope and canonical
JSON (envelope), the payload schema (schema), rounds and pairing (rounds), the cell statistics and
verdict words (stats) and the Markdown table (markdown). Pure Python: no Django, no network."""
