"""scale"""
