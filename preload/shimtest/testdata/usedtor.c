/* usedtor.c: a program linked with dtorlib, doing nothing itself. */
int main(void) { return 0; }
