"""Placeholder replaced below."""
def depth_facts(models):
    return ""
