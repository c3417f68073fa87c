"""Private helpers the concepts share: YAML files users edit, typed records, untrusted text, markdown tables,
word overlap, credentials and their redaction, the bundled scenarios and the build's commit.

Nothing here imports a concept package.
"""
