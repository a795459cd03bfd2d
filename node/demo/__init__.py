"""``make demo`` (``python -m node.demo``): three nodes on this machine, each a real ``memlane
serve`` process on loopback, forming a mesh and syncing while agents write and read over MCP.

``__main__`` (the steps and their checks), ``nodes`` (``memlane`` commands and the served
processes), ``agent`` (an MCP client with its own token on its own node), ``transcript`` (the
steps numbered, the calls' arguments shown).
"""
