namespace ty::cli {
int Main(int argc, char** argv);
}

int main(int argc, char** argv) { return ty::cli::Main(argc, argv); }
