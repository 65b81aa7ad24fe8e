"""optimize"""
