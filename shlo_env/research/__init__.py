"""The research interface: `Env`, the gym environment and its rewards, episode replay, pictures."""
