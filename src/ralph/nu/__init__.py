"""Named sessions the ralph.nu way (`ralph nu`): a spec worked through by the loop, one
agent server for the session, its iterations and notes in the event store, completion
claimed by the agent and verified by Ralph."""
