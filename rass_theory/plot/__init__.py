"""plot"""
